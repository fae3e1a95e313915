# SPDX-License-Identifier: Apache-2.0
"""Safetensors and case files (include/megamoe/safetensors.h, case.h) as dicts of numpy arrays.

The reader checks every rule of docs/case_files.md (a malformed file raises InvalidFileError naming
the tensor and the rule). Arrays are filled by the C reader and viewed without a further copy; BF16
arrives as uint16, FP8 / E8M0 as uint8 and packed 4-bit tensors as their bytes: read_safetensors
gives each tensor's megamoe dtype and logical shape next to the array.
"""
from collections import namedtuple

import numpy as np

from . import _megamoe as _c
from ._arrays import PACKED4, STORAGE, spec

Tensor = namedtuple("Tensor", "array dtype shape")
Tensor.__doc__ = """A tensor with its megamoe dtype name and logical shape (4-bit: elements, not bytes)."""


def _array(dtype, shape, data):
    storage = STORAGE[dtype]
    stored = tuple(shape)
    if dtype in PACKED4 and stored:
        stored = stored[:-1] + ((stored[-1] + 1) // 2,)
    return np.frombuffer(data, dtype=storage).reshape(stored)


def read_safetensors(path, names=None):
    """(dict name -> Tensor, metadata dict); names restricts which tensors are read."""
    items, metadata = _c.st_read(path, None if names is None else list(names))
    # "dtype.<name>" / "shape.<name>" are the writer's own record of logical dtypes, already applied to
    # the Tensors (and refused by save): they are not the caller's metadata.
    metadata = {k: v for k, v in metadata.items() if not k.startswith(("dtype.", "shape."))}
    return {n: Tensor(_array(d, s, b), d, s) for n, d, s, b in items}, metadata


def load(path, names=None):
    """dict name -> numpy array (BF16 as uint16, FP8 / E8M0 / packed 4-bit as uint8)."""
    return {n: t.array for n, t in read_safetensors(path, names)[0].items()}


def save(path, tensors, metadata=None):
    """Writes tensors (dict name -> numpy array, torch tensor or Tensor) with string metadata. uint16
    arrays and torch.bfloat16 tensors are stored as BF16; give a Tensor(array, dtype, shape) for FP8,
    E8M0 or packed 4-bit data. Tensors keep the dict's order. Atomic replacement of path."""
    entries = []
    for name, value in tensors.items():
        if isinstance(value, Tensor):
            entries.append((name, spec(value.array, name, value.dtype, value.shape)))
        else:
            entries.append((name, spec(value, name)))
    _c.st_write(path, entries, dict(metadata or {}))


def read_case(path):
    """A case file: (dict name -> Tensor, attributes: the metadata, with "op" naming the operator)."""
    return read_safetensors(path)


def run_case(in_path, out_path, backend="threads", timeout_seconds=0.0, memory_budget_bytes=0):
    """Runs a case file as `megamoe case` does and writes every rank's outputs to out_path."""
    _c.case_run(in_path, out_path, backend, float(timeout_seconds), int(memory_budget_bytes))
