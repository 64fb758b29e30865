"""The child process that runs a compiled C-simulation library (see ``csim.CSim``).

Run as a script (``python -I -S _csim_worker.py LIB SYMBOL COUNTER``), not imported: it
needs only the standard library (no site packages, not even numpy), so it starts fast, and a
crash of the C++ code (an ``assert``, ``abort``, a
segmentation fault, a stack overflow) ends this process, never the caller's.

Protocol on the pipes (binary, one request at a time): the parent writes three int64
``n, n_in, n_out`` and the float64 inputs ``[n, n_in]``; the child runs them in one call of
the library's ``tessera_csim_batch`` and answers ``!`` and the float64 outputs
``[n, n_out]``.  While it runs, the batch stores the number of finished samples in the
8-byte file ``COUNTER`` (shared memory, set to 0 by the parent before each request): the
parent's progress, and the sample a crash happened on.  The C code's own stdout goes to
stderr, which the parent keeps for its error message.
"""

import ctypes
import mmap
import os
import struct
import sys
import threading

#: io_parallel designs keep whole feature maps in local arrays: a large stack
STACK_BYTES = 1 << 30


def read_exact(f, size: int) -> bytes:
    buf = bytearray()
    while len(buf) < size:
        chunk = f.read(size - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return bytes(buf)


def main() -> int:
    lib_path, name, counter_path = sys.argv[1], sys.argv[2], sys.argv[3]
    proto = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)  # printf in the design must not corrupt the protocol
    requests = os.fdopen(os.dup(0), "rb")
    with open(counter_path, "r+b") as f:
        shared = mmap.mmap(f.fileno(), 8)
    done = ctypes.c_long.from_buffer(shared)
    lib = ctypes.cdll.LoadLibrary(lib_path)
    fn = getattr(lib, name)
    batch = lib.tessera_csim_batch
    batch.restype = ctypes.c_long
    batch.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long, ctypes.c_long, ctypes.c_long,
                      ctypes.c_void_p]

    def serve():
        while True:
            try:
                n, n_in, n_out = struct.unpack("=3q", read_exact(requests, 24))
                # writable: the bridge's signature takes non-const pointers
                x = (ctypes.c_double * (n * n_in)).from_buffer(bytearray(read_exact(requests, 8 * n * n_in)))
            except EOFError:
                return  # the parent closed the pipe
            y = (ctypes.c_double * (n * n_out))()
            batch(ctypes.cast(fn, ctypes.c_void_p), ctypes.addressof(x), ctypes.addressof(y), n, n_in, n_out,
                  ctypes.addressof(done))
            proto.write(b"!" + bytes(y))

    threading.stack_size(STACK_BYTES)
    t = threading.Thread(target=serve, name="tessera-csim")
    t.start()
    t.join()
    return 0


if __name__ == "__main__":
    sys.exit(main())
