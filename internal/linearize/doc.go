// Package linearize checks histories of namespace operations for
// linearizability: clients record each operation they make (its input,
// the time it was invoked and returned, its result, or that its outcome is
// unknown), and Check decides, with github.com/anishathalye/porcupine,
// whether some order of them, each taking effect at one instant between
// its invocation and return, explains every result under a sequential
// model of the namespace.
//
// The model covers the operations a replicated partition's fault test
// makes on a tree of directories that the test creates first and never
// removes: creating, removing, renaming and linking names in them,
// setting a mode, writing a file's whole (fixed-size) content in one
// commit, reading it, and stat. Directories created by operations stay
// empty. The history is split by directory, merging the directories an
// operation names together (a rename or link between two), so that each
// part is checked alone.
//
// An operation whose outcome is unknown (a timeout, a connection lost)
// may have taken effect or not: it is recorded with Unknown set and never
// returns, so the checker may place it anywhere after its invocation,
// including after everything else.
package linearize
