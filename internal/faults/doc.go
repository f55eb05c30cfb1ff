// Package faults injects network faults for tests of replicated
// partitions: Proxy is a TCP proxy on 127.0.0.1 that forwards one link
// (a replica to another, a client to a server) and can stop its traffic
// in one direction or both, as a network partition does, and let it go
// again. It needs no privileges and works where the kernel has no netem.
//
// A blocked direction is read from no further once the proxy holds one
// buffer of it: the sender's socket buffers fill and its writes stall,
// as they would behind a partition, and what was held is delivered, in
// order, when the direction heals. Reset drops the link's connections
// instead, as a peer that restarts would.
package faults
