"""Tools for checking environments: run the CUDA kernels on host arrays (simulator or GPU)."""
