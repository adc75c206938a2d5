# gdb script for the Go stepping check (gounwind_test.go): trace() steps
# one goroutine through every instruction of a Go function and of the
# program's functions it calls, from the function's first instruction
# until it has returned into its caller, and at each stop appends one JSON
# line to $GOUNWIND_DUMP: the general registers, the process's mappings,
# the goroutine's stack from SP to its top, and gdb's own backtrace (PC
# and SP of each frame, from Go's .debug_frame). $GOUNWIND_DUMP.done gets
# the tag of each trace that ended.
#
# The goroutine is followed through its g (R14 in Go's register ABI) and
# positions on its stack are kept as distances from the stack's top
# (g.stack.hi), which stay the same when the runtime moves the stack to a
# larger one (morestack).
#
# Only the traced thread runs during a trace (scheduler-locking on): else
# the runtime's monitor thread, seeing the goroutine run for more than
# 10ms of wall time at every step, asks it to yield at its next stack
# check again and again, and a trace could loop through morestack.
# Instead, the trace asks the goroutine to yield itself, once at each
# function with a stack check (ask_to_yield), so that every function's
# morestack block runs too.
import gdb, json, os, re

REGS = ["rip", "rsp", "rbp", "rax", "rbx", "rcx", "rdx", "rsi", "rdi",
        "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15"]

# g.stackguard0 when the runtime asks the goroutine to yield.
STACK_PREEMPT = 0xfffffffffffffade


def reg(name):
    return int(gdb.parse_and_eval("$" + name)) & 0xffffffffffffffff


def word(addr):
    return int.from_bytes(bytes(gdb.selected_inferior().read_memory(addr, 8)), "little")


def stack_hi(g):
    # g's first field is g.stack: lo, then hi; stackguard0 follows.
    return word(g + 8)


def mappings():
    maps = []
    text = gdb.execute("info proc mappings", to_string=True)
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 5 and f[0].startswith("0x"):
            path = f[-1] if not f[-1].startswith("0x") and len(f) >= 6 else ""
            maps.append({"start": int(f[0], 16), "end": int(f[1], 16), "offset": int(f[3], 16),
                         "perms": f[4] if not f[4].startswith("0x") else "", "path": path})
    return maps


def backtrace():
    # Real frames only: gdb adds the calls the compiler inlined, which
    # have no frame on the stack.
    frames = []
    fr = gdb.newest_frame()
    while fr is not None and len(frames) < 64:
        if fr.type() not in (gdb.INLINE_FRAME, gdb.TAILCALL_FRAME):
            frames.append({"pc": fr.pc(), "sp": int(fr.read_register("rsp")) & 0xffffffffffffffff,
                           "name": fr.name() or ""})
        try:
            fr = fr.older()
        except gdb.error:
            break
    return frames


def dump(tag, g):
    regs = {r: reg(r) for r in REGS}
    sp, lo, hi = regs["rsp"], word(g), stack_hi(g)
    if not lo <= sp < hi:
        raise gdb.GdbError("%s: SP %#x is not on the goroutine's stack [%#x, %#x)" % (tag, sp, lo, hi))
    mem = gdb.selected_inferior().read_memory(sp, hi - sp)
    with open(os.environ["GOUNWIND_DUMP"], "a") as out:
        out.write(json.dumps({"tag": tag, "regs": regs, "maps": mappings(), "stack": sp,
                              "mem": bytes(mem).hex(), "gdb": backtrace(),
                              "stack_lo": lo, "stack_hi": hi, "stackguard0": word(g + 16)}) + "\n")


class Return(gdb.Breakpoint):
    """Stops where a call returns to: in this goroutine, with its SP
    where it was before the call (as a distance from the stack's top)."""

    def __init__(self, pc, g, depth):
        super().__init__("*%#x" % pc, internal=True)
        self.g, self.depth = g, depth

    def stop(self):
        return reg("r14") == self.g and stack_hi(self.g) - reg("rsp") == self.depth


def run_to(pc, g, depth):
    bp = Return(pc, g, depth)
    try:
        gdb.execute("continue", to_string=True)
    finally:
        bp.delete()
    if reg("rip") != pc:
        raise gdb.GdbError("stopped at %#x, not at %#x" % (reg("rip"), pc))


def trace(tag, descend=True, limit=3000):
    """Steps from an instruction where SP is 8 below the CFA (a function's
    first, or its call of morestack) until the function has returned.
    Calls into the program's own functions (main.*) are stepped through
    when descend is set; at any other call, the callee's first instruction
    is a stop (tagged with its name) and the call then runs to its
    return. A REP-prefixed instruction, which single-steps once per
    iteration, is one stop."""
    gdb.execute("delete")
    gdb.execute("set scheduler-locking on")
    g = reg("r14")
    cfa = stack_hi(g) - (reg("rsp") + 8)
    arch = gdb.selected_frame().architecture()
    entry, yielded = descend, set()
    for i in range(limit):
        if entry:
            ask_to_yield(g, arch, yielded)
            entry = False
        dump("%s+%d" % (tag, i), g)
        if stack_hi(g) - reg("rsp") <= cfa:
            gdb.execute("set scheduler-locking off")
            with open(os.environ["GOUNWIND_DUMP"] + ".done", "a") as out:
                out.write(tag + "\n")
            return
        pc = reg("rip")
        ins = arch.disassemble(pc)[0]
        if ins["asm"].startswith("rep"):
            run_to(pc + ins["length"], g, stack_hi(g) - reg("rsp"))
            continue
        gdb.execute("stepi", to_string=True)
        if not ins["asm"].startswith("call"):
            continue
        name = gdb.newest_frame().name() or ""
        if descend and name.startswith("main."):
            entry = True
            continue
        dump("%s+%d/%s" % (tag, i, name), g)
        run_to(pc + ins["length"], g, stack_hi(g) - (reg("rsp") + 8))
    raise gdb.GdbError("%s: still in the function after %d stops" % (tag, limit))


def ask_to_yield(g, arch, yielded):
    """At the first instruction of a function with a stack check (which
    reads g from R14, and puts SP less the frame's size in R12 for a
    large frame), the first time in the trace, asks the goroutine to
    yield as the runtime does (preemptone): the check fails, and the
    function's morestack block runs, morestack yields and the goroutine
    comes back to the function's first instruction."""
    pc = reg("rip")
    first = arch.disassemble(pc)[0]["asm"]
    if pc in yielded or ("%r14" not in first and "%r12" not in first):
        return
    yielded.add(pc)
    gdb.selected_inferior().write_memory(g + 16, STACK_PREEMPT.to_bytes(8, "little"))


class Overflow(gdb.Breakpoint):
    """Stops at a function's call of morestack where its stack check
    failed because the stack is too small, not because the runtime asked
    the goroutine to yield."""

    def stop(self):
        return word(reg("r14") + 16) != STACK_PREEMPT


def break_at_overflow(fn):
    text = gdb.execute("disassemble '%s'" % fn, to_string=True)
    m = re.search(r"(0x[0-9a-f]+)[^\n]*call[^\n]*runtime\.morestack", text)
    if m is None:
        raise gdb.GdbError("no call of morestack in " + fn)
    Overflow("*" + m.group(1))
