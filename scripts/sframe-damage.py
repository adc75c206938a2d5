#!/usr/bin/env python3
"""Damage one function's rows in the .sframe of a converted ELF file, for
the acceptance scripts' controls (scripts/kernel-acceptance.sh,
scripts/glibc-acceptance.sh): the section is found through PT_GNU_SFRAME
(little-endian ELF64), the function by its start address.

  sframe-damage.py FILE ADDR MODE

MODE (the file is rewritten in place):
  lookup    V3, the function's one FRE: its start becomes func_size-1,
            which the kernel's validation accepts but which leaves the PCs
            below without an FRE, so a lookup there fails;
  validate  V3, the function's one FRE: its start becomes func_size,
            which the kernel's validation refuses;
  cfa+64    V2: 64 is added to the CFA offset of every FRE of the
            function, so a walk reads its return address from the wrong
            stack slot.
"""
import struct
import sys

PT_GNU_SFRAME = 0x6474E554
ADDR_SIZE = {0: 1, 1: 2, 2: 4}  # FRE start field by FRE type


def section(data):
    """The section's file offset and address, and its header fields."""
    e_phoff, = struct.unpack_from("<Q", data, 32)
    e_phentsize, e_phnum = struct.unpack_from("<HH", data, 54)
    off = vaddr = None
    for i in range(e_phnum):
        p_type, _, p_offset, p_vaddr = struct.unpack_from("<IIQQ", data, e_phoff + i * e_phentsize)
        if p_type == PT_GNU_SFRAME:
            off, vaddr = p_offset, p_vaddr
    if off is None:
        sys.exit("damage: no PT_GNU_SFRAME")
    magic, ver, flags, _abi, _, _, auxlen, nfdes, _nfres, _frelen, fdeoff, freoff = \
        struct.unpack_from("<HBBBbbBIIIII", data, off)
    if magic != 0xDEE2:
        sys.exit("damage: no SFrame magic at PT_GNU_SFRAME")
    return off, vaddr, ver, flags, 28 + auxlen, nfdes, fdeoff, freoff


def fre_start(data, addr, mode):
    off, vaddr, ver, flags, hdr, nfdes, fdeoff, freoff = section(data)
    if ver != 3 or not flags & 4:
        sys.exit("damage: not SFrame V3 with PC-relative starts")
    for i in range(nfdes):
        ent = hdr + fdeoff + i * 16
        start, size, fre_off = struct.unpack_from("<qII", data, off + ent)
        if vaddr + ent + start != addr:
            continue
        fda = off + hdr + freoff + fre_off
        nfre, info = struct.unpack_from("<HB", data, fda)
        if nfre != 1:
            sys.exit("damage: %d FREs in the FDE at 0x%x, want 1" % (nfre, addr))
        fmt = {1: "<B", 2: "<H", 4: "<I"}[ADDR_SIZE[info & 0xF]]
        new = size - 1 if mode == "lookup" else size
        if new >= 1 << (8 * struct.calcsize(fmt)):
            sys.exit("damage: start +%d does not fit the FRE's start field" % new)
        struct.pack_into(fmt, data, fda + 5, new)
        return "damaged: %s FRE of FDE %d (0x%x, %d bytes) now starts at +%d" % (mode, i, addr, size, new)
    sys.exit("damage: no FDE at 0x%x" % addr)


def cfa_plus_64(data, addr):
    off, vaddr, ver, flags, hdr, nfdes, fdeoff, freoff = section(data)
    if ver != 2:
        sys.exit("damage: not SFrame V2")
    done = 0
    for i in range(nfdes):
        fde = off + hdr + fdeoff + i * 20
        start, _size, fre_off, nfre, info = struct.unpack_from("<iIIIB", data, fde)
        # V2 without PCREL: the start is relative to the section; with
        # PCREL (flag 0x4), to the field itself.
        base = vaddr + hdr + fdeoff + i * 20 if flags & 4 else vaddr
        if base + start != addr:
            continue
        fre = off + hdr + freoff + fre_off
        addr_size = ADDR_SIZE[info & 0xF]
        for _ in range(nfre):
            finfo = data[fre + addr_size]
            count, osize = (finfo >> 1) & 0xF, ADDR_SIZE[(finfo >> 5) & 3]
            word = fre + addr_size + 1
            fmt = {1: "<b", 2: "<h", 4: "<i"}[osize]
            v, = struct.unpack_from(fmt, data, word)
            struct.pack_into(fmt, data, word, v + 64)
            done += 1
            fre = word + count * osize
    if done == 0:
        sys.exit("damage: no FDE at 0x%x" % addr)
    return "damaged %d FREs" % done


def main():
    if len(sys.argv) != 4 or sys.argv[3] not in ("lookup", "validate", "cfa+64"):
        sys.exit(__doc__)
    path, addr, mode = sys.argv[1], int(sys.argv[2], 16), sys.argv[3]
    data = bytearray(open(path, "rb").read())
    msg = cfa_plus_64(data, addr) if mode == "cfa+64" else fre_start(data, addr, mode)
    open(path, "wb").write(bytes(data))
    print(msg)


main()
