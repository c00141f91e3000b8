"""BACKEND=mpi's process group (its record: suite/common/backends/mpi.py): ``group`` (a c10d process group over
mpi4py, registered with c10d; suite.api exports it as ``mpi_backend``), ``watch`` (each op it issues, told to whoever
watches: the sharded inventory) and ``rank`` (``python -m suite.harness.mpi.rank``: a rank mpiexec started, its
pytest session in a child). Importing this package imports neither mpi4py nor torch."""
