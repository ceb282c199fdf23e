"""Passes, each a small function IR → IR. Their order lives in srcgrad.pipeline."""
