// Package stepbench holds a benchmark comparing one unwind step with SFrame
// (package unwind) against one with DWARF CFI (package cfi) on the same
// PCs of a real library. It has no code of its own: it lives apart so that
// unwind need not import cfi.
package stepbench
