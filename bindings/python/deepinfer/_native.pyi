# The SWIG module (deepinfer.i): the functions and constants of deepinfer.h under their own names,
# handles as ints. Private: the typed API is the deepinfer package.
from typing import Any

def __getattr__(name: str) -> Any: ...
