//go:build !linux

package hugepage

func advise([]byte) error { return nil }
