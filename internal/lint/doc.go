// Package lint holds the house rules of the repository as tests: every
// package has a doc comment, and every Go file is formatted as gofmt
// formats it. It has no code of its own; `go test ./internal/lint` runs the
// checks, and .ci/run runs them with the rest of the suite.
package lint
