package codeflow

// STUB for integration only: replaced by branch cf-engine at merge.
func Analyze(c *Code, emit func(Func), skip func(Skip)) {}
