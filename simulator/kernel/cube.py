"""The Cube path, in Ascend C's words: GM -> L1 with ND->NZ conversion (MTE2), L1 -> L0A/L0B
load2d and img2col load3d (MTE1), Mmad on the cube (M), L0C -> GM with NZ->ND and dtype
conversion (Fixpipe, A2) or L0C -> UB (the coupled chips), InitConstValue and SetHF32Mode.
This module gathers them from their families: cube_load.py (ND->NZ, InitConstValue, load2d,
load3d), mmad.py, fixpipe.py (and L0C -> UB), operands.py (the checks and record-time memo they
share). Transpose (UB, PIPE_V) lives with the vector instructions in vector.py; it does
NCHW <-> NHWC, from which NC1HWC0 (NCHW2NHWC on (N*C1, C0, H, W)) and FRACTAL_Z weights (the
same plus a strided DataCopy) are built; ND <-> NZ is DataCopy with Nd2NzParams one way and
Fixpipe (or L0C -> UB plus a strided UB -> GM copy) the other.

Layouts (Ascend C `Mmad` documentation; SPEC section 2):

* L1 (A1/B1), the usual NZ: a matrix of R rows x D columns is cut into column strips of C0
  elements (C0 = 32 B / element size: 16 fp16/bf16, 8 fp32, 32 int8); each strip stores its rows
  one after another, 32 B per row. An NZ fractal is 16 rows x C0.
* L0A (A2), zZ: A (m x k) in fractals of 16 x k0 (k0 = 32 B / element size), fractals row-major
  (for each 16-row band all its k fractals), each fractal row-major. 512 B per fractal.
* L0B (B2), zN: B (k x n) in fractals of k0 x 16, fractals row-major over (k band, n band), each
  fractal column-major: 16 rows of 32 B, one per column n, holding k0 values of k.
* L0C (CO1), NZ: C (m x n) in 16 x 16 fractals of fp32 (int32 for int8), column strips of 16
  ordered strip by strip, each strip ceil16(m) rows of 16 values.

Every instruction checks its operands where it is written (buffers, capacity, alignment, GM
extent, dtypes the chip's Cube multiplies) and names core, pipe and instruction in its fault;
every cost comes from the profile (`paths`, `cube`), never from a constant here.
"""
from __future__ import annotations

from .operands import SetHF32Mode, hf32_round
from .cube_load import (Nd2NzParams, InitConstValueParams, InitConstValue, LoadData2DParams,
                        LoadData3DParamsV2, LoadData, img2col_shape)
from .mmad import MmadParams, Mmad, mmad_cycles, cube_dtype
from .fixpipe import (QuantMode_t, FixpipeConfig, CFG_ROW_MAJOR, CFG_NZ, FixpipeParamsV220, FixpipeParams,
                      Fixpipe, BlockMode, DeqScale, DataCopyEnhancedParams)

__all__ = ["Nd2NzParams", "InitConstValueParams", "InitConstValue", "LoadData2DParams", "LoadData3DParamsV2",
           "LoadData", "img2col_shape", "MmadParams", "Mmad", "mmad_cycles", "cube_dtype", "SetHF32Mode",
           "hf32_round", "QuantMode_t", "FixpipeConfig", "CFG_ROW_MAJOR", "CFG_NZ", "FixpipeParamsV220",
           "FixpipeParams", "Fixpipe", "BlockMode", "DeqScale", "DataCopyEnhancedParams"]
