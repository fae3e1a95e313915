# SPDX-License-Identifier: Apache-2.0
"""megamoe: Mixture-of-Experts operators on CPUs, from Python (docs/python.md).

A CPython extension (megamoe._megamoe) over the public C API of libmegamoe, and this thin layer:
  - errors: megamoe.Error and one subclass per mm_status, carrying the library's one-line message;
  - number formats (exact, as the library computes them): encode / decode, to_bf16, round_bf16,
    mx_quantize / mx_dequantize, int8_quantize, int4_pack / int4_unpack, mx_scale_byte;
  - files: load / save / read_safetensors (dicts of numpy arrays), read_case / run_case;
  - engine calls: Experts (local experts call), World (MegaMoE on rank threads), MegaMoE (over mpi4py).
BF16 is a numpy uint16 array of bit patterns; torch.bfloat16 CPU tensors are accepted and returned.
"""
from ._megamoe import (CommTimeoutError, Error, InternalError, InvalidArgumentError, InvalidFileError,
                       IoError, OutOfMemoryError, PeerError, UnsupportedError, Weights, mpi_available)
from ._formats import (bf16_to_f32, decode, encode, f16_to_f32, int4_pack, int4_unpack, int8_quantize,
                       mx_dequantize, mx_quantize, mx_scale_byte, round_bf16, to_bf16, to_f16)
from ._io import Tensor, load, read_case, read_safetensors, run_case, save

try:
    from ._engine import ExpertWeights, Experts, MegaMoE, World
except ImportError:  # pragma: no cover - a build without the engine bindings
    pass

__all__ = [name for name in dir() if not name.startswith("_")]
