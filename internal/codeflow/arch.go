package codeflow

// flow is how control leaves an instruction.
type flow uint8

const (
	flowNext     flow = iota // to the next instruction
	flowCall                 // a call to target (0: through a register); then the next instruction unless target does not return
	flowJump                 // to target only
	flowBranch               // to target or the next instruction
	flowTable                // to each of targets: a jump table resolved from its bounds check
	flowIndirect             // through a register or memory, unresolved: a tail call if the state is the entry's, else the function is left out
	flowReturn               // back to the caller (the state must be the entry's)
	flowStop                 // nowhere: a trap, a halt, ud2
)

// next is how an instruction ends: its length and where control goes.
type next struct {
	len     int
	flow    flow
	target  uint64
	targets []uint64
}

// failure is why an instruction ends the analysis of its function.
type failure struct {
	reason Reason
	detail string
}

func (f *failure) Error() string { return string(f.reason) + ": " + f.detail }

// arch is what the walk needs of an instruction set (amd64.go, arm64.go).
type arch interface {
	// entry is the state at a function's entry.
	entry() State
	// step decodes the instruction at pc (b holds the bytes from pc to
	// the end of its executable range), applies its effect to s, and
	// says how control leaves it; an error (a *failure) is why the
	// function is left out. w gives the code (jump tables, calls that do
	// not return) and the instructions before pc in the same block.
	step(w *walk, b []byte, pc uint64, s *State) (next, error)
	// rule is the row s gives (its PC unset), or why it gives none.
	rule(s *State) (Row, error)
	// tail says s is the state a tail call leaves: the frame gone, as at
	// the entry.
	tail(s *State) bool
}

// walk is one function's analysis in progress (engine.go).
type walk struct {
	code *Code
	// block holds the PCs of up to histLen instructions before the current
	// one on one path to it, oldest first: each one's first predecessor
	// (the first instruction the walk reached it from), across the ends
	// of basic blocks, so that a jump table finds the bounds check at the
	// end of the block before its own. An arch that relies on it must
	// call w.single for the instructions whose other predecessors would
	// bypass what it read (checked when the walk ends).
	block []uint64
	// cur is the rec being stepped, pathOf the one block was found for
	// (path).
	cur, pathOf int32

	arch  arch
	regs  [2]int // DWARF numbers of the stack and frame pointers
	entry Entry
	index map[uint64]int32 // reached instruction -> recs
	recs  []rec
	work  []int32 // recs to step (again)
	solo  []soloCheck
	parts map[uint64]bool // other entries jumped to with a frame in place
	last  uint64          // the end of the last instruction reached
	// entrySP is where the stack pointer is at the entry (CFA+entrySP):
	// no path of a function goes above it.
	entrySP int64
	// returned: a path reached a return (a FromPadding entry needs one).
	returned bool
	// tails are the targets of tail calls to code no entry starts.
	tails []uint64
	// framed is a tail-called entry a path reached with a frame in
	// place (arrive), 0 for none.
	framed uint64
	// preds are the predecessors of an instruction other than its rec's
	// first one (the arrivals that set multi), for a jump table's bounds
	// check proven again on every path when the walk ends (recheck).
	preds map[uint64][]uint64
	// tables are the targets the walk took from each resolved jump table.
	tables map[uint64][]uint64
	// scanned are the jump tables bounded by their content (amd64table.go's
	// scan), whose joins scannedJoins checks when the walk ends.
	scanned map[uint64]bool
	// a64 is what the AArch64 steps remember across one function's
	// paths: the PAC keys seen, the bounds checks that guard blocks.
	a64 arm64Hist
	// st is the state being stepped (run); order and pcs are funcs's
	// and reached's buffers, kept with the others for the next walk
	// (reset).
	st     State
	order  []int32
	pcs    []uint64
	rowBuf []Row // funcs's rows
}

// rec is what the walk keeps of one reached instruction.
type rec struct {
	s       State // before it runs
	pc      uint64
	pred    uint64 // its first predecessor, when hasPred
	n       uint8  // its length once stepped
	hasPred bool
	multi   bool // reached from more than one instruction (or the entry and one)
	queued  bool
}

// soloCheck: the instruction at pc must have one predecessor, or the jump
// table at jump was resolved from a bounds check other paths bypass.
type soloCheck struct{ pc, jump uint64 }

// rechecker is an arch that can prove a jump table's bound again on
// every path into the jump when one of its soloChecks failed: true when
// each path gives a subset of the targets the walk took (w.tables).
type rechecker interface {
	recheck(w *walk, jump uint64) bool
}

// setBase sets r's CFA rule from what s knows of SP and FP (r.SP and
// r.FPVal, already filled), the same on every instruction set; false
// when neither gives it.
func setBase(r *Row, s *State) bool {
	switch {
	case r.FPVal.Known && s.FP.Where == OnStack && r.FPVal.Off == s.FP.Off:
		// A frame record (FP points at the caller's saved FP): the rule
		// holds whatever SP does (alloca, realignment), as GCC's CFI.
		r.Base, r.CFAOff = BaseFP, -r.FPVal.Off
	case r.SP.Known:
		// From SP wherever it is known otherwise: a frame address the
		// FP register happens to hold (a pointer to a local, with the
		// caller's FP saved elsewhere) is no frame pointer, and a row
		// from it hides SP from the rule check (verify).
		r.Base, r.CFAOff = BaseSP, -r.SP.Off
	case r.FPVal.Known && s.FP.Where == OnStack:
		r.Base, r.CFAOff = BaseFP, -r.FPVal.Off
	default:
		return false
	}
	return true
}
