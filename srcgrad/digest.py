"""SHA-256 without hashlib's import where the process has not made it (issue 15).

Importing hashlib loads OpenSSL: ~3 ms of a fresh process, for hashing a few kilobytes
(cache keys, cache files' checks, fingerprints of sources and constants). Python's own
implementation (_sha256 in 3.11, _sha2 from 3.12) gives the same digests; a process that
has imported hashlib already (NumPy's random module does) uses it, with no load at all.
(The module for this version first: a failed import searches the whole path, 0.1 ms.)
"""

import sys

if "hashlib" in sys.modules:
    sha256 = sys.modules["hashlib"].sha256
else:
    try:
        if sys.version_info >= (3, 12):
            from _sha2 import sha256
        else:
            from _sha256 import sha256
    except ImportError:
        from hashlib import sha256

__all__ = ["sha256"]
