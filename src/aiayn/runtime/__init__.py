"""How the model runs fast on this machine, apart from what it computes (section 3 is `aiayn.model`).

`linear` (matrix-product kernels chosen by measurement), `quantize` (int8 inference), `native_step`
(the decoder's step as one native call), `blockwise` (the search's blocked row maximum and top-k),
`kernels` (training's matmul backend, measured) and `malloc` (the command's memory allocator).
This package may import `aiayn.model`; the model imports nothing from it.
"""
