//go:build !linux

package trace

import (
	"context"
	"errors"
	"time"
)

var errLinux = errors.New("trace samples Linux processes only")

// Options says what to sample and how (see the Linux build).
type Options struct {
	Freq         int
	Duration     time.Duration
	PID          int
	Argv         []string
	Dwarf        bool
	Convert      Converter
	ConvertFiles bool
}

// Result is what a run collected (see the Linux build).
type Result struct {
	*Collector
	PID        int
	Threads    int
	Start      time.Time
	Elapsed    time.Duration
	TracerCPU  time.Duration
	Lost       int
	Late       int
	Exit       string
	Detached   int
	StopReason string
}

// Run fails: ptrace sampling needs Linux.
func Run(ctx context.Context, opt Options) (*Result, error) { return nil, errLinux }

func processRead(pid int, dst []byte, addr uint64) (int, error) { return 0, errLinux }

func threadCPU() time.Duration { return 0 }

func processCPU() time.Duration { return 0 }
