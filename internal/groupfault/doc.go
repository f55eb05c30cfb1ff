// Package groupfault holds the process-level fault tests of a replicated
// partition: three `canopy meta --peers` processes of one partition,
// every replica-to-replica link through an internal/faults proxy, one
// router in front, and clients running internal/linearize's workload
// while replicas are killed (SIGKILL), paused (SIGSTOP, SIGCONT) and cut
// off from each other, one way or both. After the faults heal, the
// history must be linearizable and every replica must hold the same,
// valid state. The package has no code outside its tests.
package groupfault
