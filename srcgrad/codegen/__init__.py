"""Code generation: IR to Python source, the module cache and the loader."""
