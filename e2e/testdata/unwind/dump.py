# gdb script: at each stop, append one JSON line to $UNWIND_DUMP with the
# general registers, the process's mappings and the stack from SP to the
# end of its mapping.
import gdb, json, os, re

REGS = ["rip", "rsp", "rbp", "rax", "rbx", "rcx", "rdx", "rsi", "rdi",
        "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15"]

def dump(tag):
    regs = {r: int(gdb.parse_and_eval("$" + r)) & 0xffffffffffffffff for r in REGS}
    maps = []
    text = gdb.execute("info proc mappings", to_string=True)
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 5 and f[0].startswith("0x"):
            path = f[-1] if not f[-1].startswith("0x") and len(f) >= 6 else ""
            maps.append({"start": int(f[0], 16), "end": int(f[1], 16), "offset": int(f[3], 16), "perms": f[4] if not f[4].startswith("0x") else "", "path": path})
    sp = regs["rsp"]
    end = next(m["end"] for m in maps if m["start"] <= sp < m["end"])
    mem = gdb.selected_inferior().read_memory(sp, end - sp)
    # gdb's own (DWARF) backtrace, for a frame-by-frame comparison: real
    # frames only (gdb adds inlined calls and, with debug info, tail calls
    # it infers from call-site data; neither has a frame on the stack).
    pcs = []
    fr = gdb.newest_frame()
    while fr is not None and len(pcs) < 64:
        if fr.type() not in (gdb.INLINE_FRAME, gdb.TAILCALL_FRAME):
            pcs.append(fr.pc())
        try:
            fr = fr.older()
        except gdb.error:
            break
    with open(os.environ["UNWIND_DUMP"], "a") as out:
        out.write(json.dumps({"tag": tag, "regs": regs, "maps": maps, "stack": sp, "mem": bytes(mem).hex(), "gdb": pcs}) + "\n")

def steps(tag, n):
    for i in range(n):
        dump("%s+%d" % (tag, i))
        gdb.execute("stepi", to_string=True)
