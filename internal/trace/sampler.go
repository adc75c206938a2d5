//go:build linux

package trace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Options says what to sample and how.
type Options struct {
	Freq     int           // samples per second per thread
	Duration time.Duration // 0: until the process exits or ctx ends
	PID      int           // sample this process ...
	Argv     []string      // ... or start this program and trace it to its exit
	Dwarf    bool          // also step every frame with DWARF CFI
	// Convert builds SFrame in memory for the vDSO and, with
	// ConvertFiles, for every ELF file mapped without .sframe (see
	// Collector.Convert); nil leaves them without.
	Convert      Converter
	ConvertFiles bool
}

// Result is what a run collected.
type Result struct {
	*Collector
	PID        int
	Threads    int // threads seen
	Start      time.Time
	Elapsed    time.Duration // from the first interrupt to the detach
	TracerCPU  time.Duration // user+system CPU time of this process over the run
	Lost       int           // interrupts answered by an exit instead of a stop
	Late       int           // ticks at which a thread had not stopped since the previous one
	Exit       string        // how a started program or the sampled process ended, "" if it did not
	Detached   int           // threads detached at the end
	StopReason string        // why sampling ended
}

type thread struct {
	tid       int
	pending   bool // interrupted, stop not yet seen
	groupStop bool // in a group-stop, left listening
}

type sampler struct {
	opt     Options
	pid     int
	child   bool // we started pid
	threads map[int]*thread
	col     *Collector
	res     *Result
	stale   bool // an exec replaced the address space
}

const seizeOptions = unix.PTRACE_O_TRACECLONE | unix.PTRACE_O_TRACEEXEC

// Run samples a process until opt.Duration passes, it exits, or ctx ends
// (Ctrl-C); every thread is detached before it returns. All ptrace calls
// and all waiting happen on one locked OS thread.
func Run(ctx context.Context, opt Options) (*Result, error) {
	if !supported {
		_, err := topFrame(0)
		return nil, err
	}
	if opt.Freq <= 0 || opt.Freq > 10000 {
		return nil, fmt.Errorf("frequency %d Hz out of range 1..10000", opt.Freq)
	}
	type out struct {
		r   *Result
		err error
	}
	ch := make(chan out, 1)
	go func() {
		// Never unlocked: the thread that is the tracer ends with this
		// goroutine, which the kernel treats as a detach of anything left.
		runtime.LockOSThread()
		r, err := run(ctx, opt)
		ch <- out{r, err}
	}()
	o := <-ch
	return o.r, o.err
}

func run(ctx context.Context, opt Options) (*Result, error) {
	// res is there from the start: detaching after a failed attach
	// counts threads too.
	s := &sampler{opt: opt, threads: map[int]*thread{}, res: &Result{}}
	chld := make(chan os.Signal, 16)
	signal.Notify(chld, syscall.SIGCHLD)
	defer signal.Stop(chld)
	var ru0 unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru0)
	if len(opt.Argv) > 0 {
		if err := s.start(); err != nil {
			return nil, err
		}
	} else {
		s.pid = opt.PID
		if err := s.attach(); err != nil {
			return nil, err
		}
	}
	s.col = NewCollector(s.pid, opt.Dwarf)
	s.col.Convert, s.col.ConvertFiles = opt.Convert, opt.ConvertFiles
	s.res.Collector, s.res.PID = s.col, s.pid
	if err := s.col.Refresh(); err != nil && !s.gone() {
		s.detachAll()
		return nil, fmt.Errorf("process %d: %v", s.pid, err)
	}
	s.res.Threads = len(s.threads)
	t0 := time.Now()
	s.res.Start = t0
	s.loop(ctx, chld)
	s.res.Elapsed = time.Since(t0)
	if s.child && s.res.Exit == "" {
		// After a time limit the program runs on, untraced, and is waited
		// for, until it exits or ctx ends (then it is left running).
		s.waitChild(ctx)
	}
	var ru1 unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru1)
	s.res.TracerCPU = time.Duration(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano()) * time.Nanosecond
	return s.res, nil
}

func (s *sampler) gone() bool {
	_, err := os.Stat(fmt.Sprintf("/proc/%d", s.pid))
	return err != nil
}

// start runs the program in a child and seizes it.
func (s *sampler) start() error {
	path, err := exec.LookPath(s.opt.Argv[0])
	if err != nil {
		return err
	}
	if path, err = filepath.Abs(path); err != nil {
		return err
	}
	pid, err := syscall.ForkExec(path, s.opt.Argv, &syscall.ProcAttr{
		Env:   os.Environ(),
		Files: []uintptr{0, 1, 2},
	})
	if err != nil {
		return fmt.Errorf("%s: %v", s.opt.Argv[0], err)
	}
	s.pid, s.child = pid, true
	if err := s.attach(); err != nil {
		syscall.Kill(pid, syscall.SIGKILL)
		var ws unix.WaitStatus
		unix.Wait4(pid, &ws, 0, nil)
		return err
	}
	return nil
}

func seize(tid int) error {
	_, _, e := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_SEIZE, uintptr(tid), 0, seizeOptions, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// tracedByUs says whether thread tid of process pid is traced by this
// process (its TracerPid in /proc).
func tracedByUs(pid, tid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/status", pid, tid))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "TracerPid:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			return err == nil && n == os.Getpid()
		}
	}
	return false
}

func ptraceSig(req, tid, sig int) error {
	_, _, e := unix.Syscall6(unix.SYS_PTRACE, uintptr(req), uintptr(tid), 0, uintptr(sig), 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// attach seizes every thread of s.pid, listing /proc/PID/task until no
// new thread appears (threads started by seized ones are followed by
// PTRACE_O_TRACECLONE).
func (s *sampler) attach() error {
	dir := fmt.Sprintf("/proc/%d/task", s.pid)
	for round := 0; round < 100; round++ {
		ents, err := os.ReadDir(dir)
		if err != nil {
			if len(s.threads) == 0 {
				if errors.Is(err, os.ErrNotExist) {
					return fmt.Errorf("no process %d", s.pid)
				}
				return fmt.Errorf("process %d: %v", s.pid, err)
			}
			return nil // exited while attaching; the loop sees it
		}
		added := 0
		for _, e := range ents {
			tid, err := strconv.Atoi(e.Name())
			if err != nil || s.threads[tid] != nil {
				continue
			}
			if err := seize(tid); err != nil {
				if err == unix.ESRCH {
					continue
				}
				if err == unix.EPERM && tracedByUs(s.pid, tid) {
					// Started by a seized thread since the listing:
					// PTRACE_O_TRACECLONE attached it, and its clone
					// event is still to come.
					s.threads[tid] = &thread{tid: tid}
					added++
					continue
				}
				if len(s.threads) == 0 {
					return permError(s.pid, err)
				}
				s.detachAll()
				return fmt.Errorf("process %d: thread %d: ptrace seize: %v", s.pid, tid, err)
			}
			s.threads[tid] = &thread{tid: tid}
			added++
		}
		if added == 0 {
			break
		}
	}
	if len(s.threads) == 0 {
		return fmt.Errorf("no process %d", s.pid)
	}
	return nil
}

func permError(pid int, err error) error {
	if err == unix.EPERM {
		scope := ""
		if b, e := os.ReadFile("/proc/sys/kernel/yama/ptrace_scope"); e == nil && len(b) > 0 && b[0] != '0' {
			scope = fmt.Sprintf(", kernel.yama.ptrace_scope is %c", b[0])
		}
		return fmt.Errorf("cannot trace process %d: permission denied (another user's process, already traced, or not allowed%s)", pid, scope)
	}
	if err == unix.ESRCH {
		return fmt.Errorf("no process %d", pid)
	}
	return fmt.Errorf("cannot trace process %d: %v", pid, err)
}

// loop samples until the time limit, ctx or the process's exit.
func (s *sampler) loop(ctx context.Context, chld <-chan os.Signal) {
	tick := time.NewTicker(time.Second / time.Duration(s.opt.Freq))
	defer tick.Stop()
	poll := time.NewTicker(5 * time.Millisecond) // a missed SIGCHLD costs at most this
	defer poll.Stop()
	var limit <-chan time.Time
	if s.opt.Duration > 0 {
		t := time.NewTimer(s.opt.Duration)
		defer t.Stop()
		limit = t.C
	}
	for len(s.threads) > 0 {
		select {
		case <-ctx.Done():
			s.res.StopReason = "interrupted"
			s.detachAll()
			return
		case <-limit:
			s.res.StopReason = "time limit"
			s.detachAll()
			return
		case <-chld:
		case <-poll.C:
		case <-tick.C:
			s.reap()
			s.interrupt()
		}
		s.reap()
	}
	if s.res.StopReason == "" {
		s.res.StopReason = "process exited"
	}
}

// interrupt asks every running thread to stop for a sample.
func (s *sampler) interrupt() {
	for _, t := range s.threads {
		if t.groupStop {
			continue
		}
		if t.pending {
			s.res.Late++
			continue
		}
		if err := unix.PtraceInterrupt(t.tid); err == nil {
			t.pending = true
		}
	}
}

// reap handles every wait status available without blocking.
func (s *sampler) reap() {
	for {
		var ws unix.WaitStatus
		tid, err := unix.Wait4(-1, &ws, unix.WNOHANG|unix.WALL, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil || tid <= 0 {
			return
		}
		s.handle(tid, ws, false)
	}
}

// handle acts on one wait status. When detaching, every stopped thread
// is detached instead of resumed.
func (s *sampler) handle(tid int, ws unix.WaitStatus, detaching bool) {
	t := s.threads[tid]
	if ws.Exited() || ws.Signaled() {
		if t != nil && t.pending {
			s.res.Lost++
		}
		delete(s.threads, tid)
		if tid == s.pid {
			s.res.Exit = exitText(ws)
		}
		return
	}
	if !ws.Stopped() {
		return
	}
	if t == nil {
		// A new thread's first stop can come before its creator's clone
		// event.
		t = &thread{tid: tid}
		s.threads[tid] = t
		s.res.Threads++
	}
	sig := ws.StopSignal()
	// The event is in bits 16-23 of the status; TrapCause reports it only
	// for SIGTRAP stops, and a group-stop's PTRACE_EVENT_STOP carries the
	// stop signal.
	ev := int(ws) >> 16 & 0xff
	resume := func(sig int) {
		if detaching {
			ptraceSig(unix.PTRACE_DETACH, tid, sig)
			delete(s.threads, tid)
			s.res.Detached++
			return
		}
		if err := ptraceSig(unix.PTRACE_CONT, tid, sig); err == unix.ESRCH {
			delete(s.threads, tid) // killed meanwhile; its exit status follows
		}
	}
	switch {
	case sig == unix.SIGTRAP && ev == unix.PTRACE_EVENT_CLONE:
		if msg, err := unix.PtraceGetEventMsg(tid); err == nil && s.threads[int(msg)] == nil {
			s.threads[int(msg)] = &thread{tid: int(msg)}
			s.res.Threads++
		}
		resume(0)
	case sig == unix.SIGTRAP && ev == unix.PTRACE_EVENT_EXEC:
		if msg, err := unix.PtraceGetEventMsg(tid); err == nil && int(msg) != tid {
			delete(s.threads, int(msg)) // the execing thread took the leader's id
		}
		s.stale = true
		resume(0)
	case ev == unix.PTRACE_EVENT_STOP && (sig == unix.SIGSTOP || sig == unix.SIGTSTP || sig == unix.SIGTTIN || sig == unix.SIGTTOU):
		// Group-stop: the process was stopped by job control; leave it
		// stopped, listening for SIGCONT.
		t.groupStop, t.pending = true, false
		if detaching {
			resume(0)
			return
		}
		ptraceSig(unix.PTRACE_LISTEN, tid, 0)
	case ev == unix.PTRACE_EVENT_STOP:
		// Interrupt stop (ours), a new thread's first stop, or the end
		// of a group-stop.
		t.groupStop = false
		if t.pending && !detaching {
			t.pending = false
			t0, c0 := time.Now(), threadCPU()
			s.sample(tid)
			resume(0)
			s.col.WalkCPU += threadCPU() - c0
			s.col.WalkTime += time.Since(t0)
			return
		}
		resume(0)
	case sig == unix.SIGTRAP && ev > 0:
		resume(0) // another event
	default:
		// Signal-delivery stop: deliver the signal as if not traced.
		resume(int(sig))
	}
}

// sample walks the stack of a thread in an interrupt stop.
func (s *sampler) sample(tid int) {
	f, err := topFrame(tid)
	if err != nil {
		s.res.Lost++
		return
	}
	if s.stale {
		s.stale = false
		t1 := threadCPU()
		s.col.Refresh()
		s.col.RefreshTime += threadCPU() - t1
	}
	s.col.Sample(f)
}

// detachAll stops every running thread and detaches them all, passing on
// any signal caught on the way; it gives threads that do not stop (in an
// uninterruptible sleep) two seconds.
func (s *sampler) detachAll() {
	for _, t := range s.threads {
		if t.groupStop {
			// Listening tracees are in a ptrace stop: detach at once;
			// they stay in the group-stop.
			if ptraceSig(unix.PTRACE_DETACH, t.tid, 0) == nil {
				s.res.Detached++
			}
			delete(s.threads, t.tid)
			continue
		}
		if !t.pending {
			if err := unix.PtraceInterrupt(t.tid); err == nil {
				t.pending = true
			}
		}
	}
	deadline := time.Now().Add(2 * time.Second)
	for len(s.threads) > 0 && time.Now().Before(deadline) {
		var ws unix.WaitStatus
		tid, err := unix.Wait4(-1, &ws, unix.WNOHANG|unix.WALL, nil)
		if err == unix.EINTR {
			continue
		}
		if err == unix.ECHILD {
			break
		}
		if err != nil || tid <= 0 {
			time.Sleep(200 * time.Microsecond)
			continue
		}
		if ws.Stopped() && s.threads[tid] == nil {
			// A thread created meanwhile.
			s.threads[tid] = &thread{tid: tid}
		}
		s.handle(tid, ws, true)
	}
}

func exitText(ws unix.WaitStatus) string {
	switch {
	case ws.Exited():
		return fmt.Sprintf("exited with status %d", ws.ExitStatus())
	case ws.Signaled():
		return fmt.Sprintf("killed by signal %v", ws.Signal())
	}
	return "ended"
}

// waitChild waits for the started program to exit, polling so that ctx
// (a second Ctrl-C) can end the wait.
func (s *sampler) waitChild(ctx context.Context) {
	for ctx.Err() == nil {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(s.pid, &ws, unix.WNOHANG, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return
		}
		if pid == s.pid && (ws.Exited() || ws.Signaled()) {
			s.res.Exit = exitText(ws)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
