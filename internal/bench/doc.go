// Package bench measures a running Canopy from the outside, through the Go
// SDK: a load runner (closed loop and open loop, warm-up, rounds, HDR
// latency histograms), the workloads it drives (null calls and mdtest-style
// metadata operations), the harness ceiling every result is judged against,
// and the reports (a human table, CSV rows, one JSON line).
//
// A figure means little without the fastest the harness could have gone,
// so every result carries a ceiling: for metadata workloads the null call
// (Ping) at the same concurrency over the same connections, for the null
// call itself a no-op function driven by the same runner. A result close to
// its ceiling measures the harness, not the server, and says so in its
// warnings.
package bench
