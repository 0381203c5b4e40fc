#!/usr/bin/env python3
# fsx-style exerciser (after xfstests fsx, which Debian does not package):
# random buffered, mmap, O_DIRECT, truncate, fallocate
# and copy_file_range operations on one file, each checked against a model.
# usage: fsx.py PATH HOST_PATH OPERATIONS SEED
import os, sys, mmap, random, ctypes

libc = ctypes.CDLL(None, use_errno=True)

path, host, nops, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rnd = random.Random(seed)
MAX, PAGE, BLK = 1 << 20, mmap.PAGESIZE, 4096
model = bytearray()
fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
dfd = os.open(path, os.O_RDWR | os.O_DIRECT)
abuf = mmap.mmap(-1, MAX)  # page-aligned buffer for O_DIRECT


def fail(what, off=0):
    print("seed %d: %s (offset %d, size %d)" % (seed, what, off, len(model)))
    sys.exit(1)


def check(off, got):
    want = bytes(model[off:off + len(got)])
    if got != want:
        fail("read back wrong data", off)


def setlen(n):
    if n > len(model):
        model.extend(b"\0" * (n - len(model)))
    else:
        del model[n:]


for i in range(nops):
    op = rnd.randrange(9)
    size = len(model)
    if op == 0:  # write
        off, n = rnd.randrange(MAX), rnd.randrange(1, 65536)
        n = min(n, MAX - off)
        data = bytes(rnd.getrandbits(8) for _ in range(min(n, 64))) * (n // 64 + 1)
        data = data[:n]
        os.pwrite(fd, data, off)
        setlen(max(size, off + n))
        model[off:off + n] = data
    elif op == 1 and size:  # read
        off = rnd.randrange(size)
        check(off, os.pread(fd, rnd.randrange(1, 65536), off))
    elif op == 2:  # truncate
        n = rnd.randrange(MAX)
        os.ftruncate(fd, n)
        setlen(n)
    elif op == 3 and size:  # mmap read
        m = mmap.mmap(fd, size, prot=mmap.PROT_READ)
        off = rnd.randrange(size)
        check(off, m[off:off + rnd.randrange(1, 65536)])
        m.close()
    elif op == 4 and size:  # mmap write inside the file
        off = rnd.randrange(size)
        n = min(rnd.randrange(1, 65536), size - off)
        data = bytes([rnd.getrandbits(8)]) * n
        m = mmap.mmap(fd, size)
        m[off:off + n] = data
        m.flush()
        m.close()
        model[off:off + n] = data
    elif op == 5:  # O_DIRECT write, block aligned
        off = rnd.randrange(MAX // BLK) * BLK
        n = min(rnd.randrange(1, 16) * BLK, MAX - off)
        data = bytes([rnd.getrandbits(8)]) * n
        abuf[0:n] = data
        if os.pwritev(dfd, [memoryview(abuf)[:n]], off) != n:
            fail("short direct write", off)
        setlen(max(size, off + n))
        model[off:off + n] = data
    elif op == 6 and size:  # O_DIRECT read
        off = rnd.randrange(max(1, size // BLK)) * BLK
        n = rnd.randrange(1, 16) * BLK
        got = os.preadv(dfd, [memoryview(abuf)[:n]], off)
        check(off, bytes(abuf[:got]))
        if got != min(n, max(0, size - off)):
            fail("direct read of %d bytes returned %d" % (n, got), off)
    elif op == 7 and size:  # fallocate: plain, keep size, punch hole
        off, n = rnd.randrange(MAX - 1), rnd.randrange(1, 65536)
        n = min(n, MAX - off)
        mode = rnd.choice([0, 1, 3])  # 1 KEEP_SIZE, 2 PUNCH_HOLE
        if libc.fallocate(fd, mode, ctypes.c_longlong(off), ctypes.c_longlong(n)) != 0:
            fail("fallocate: %s" % os.strerror(ctypes.get_errno()), off)
        if mode == 0:
            setlen(max(size, off + n))
        elif mode == 3 and off < size:
            end = min(size, off + n)
            model[off:end] = b"\0" * (end - off)
    elif op == 8 and size > 2:  # copy_file_range within the file, no overlap
        a = rnd.randrange(size // 2)
        n = min(rnd.randrange(1, 65536), size // 2 - a)
        b = rnd.randrange(size // 2, size)
        got = os.copy_file_range(fd, fd, n, a, b)
        chunk = bytes(model[a:a + got])
        setlen(max(size, b + got))
        model[b:b + got] = chunk
    if os.fstat(fd).st_size != len(model):
        fail("op %d: size %d, model %d" % (op, os.fstat(fd).st_size, len(model)))

os.fsync(fd)
os.close(fd)
os.close(dfd)
with open(path, "rb") as f:
    if f.read() != bytes(model):
        fail("final buffered read differs")
with open(host, "rb") as f:
    if f.read() != bytes(model):
        fail("the host file differs")
print("seed %d: %d operations, final size %d: ok" % (seed, nops, len(model)))
