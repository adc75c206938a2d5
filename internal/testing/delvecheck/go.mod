module github.com/cfi2sframe/cfi2sframe/internal/testing/delvecheck

go 1.25.0

require (
	github.com/cfi2sframe/cfi2sframe v0.0.0
	github.com/go-delve/delve v1.27.2
)

require golang.org/x/arch v0.30.0 // indirect

replace github.com/cfi2sframe/cfi2sframe => ../../..
