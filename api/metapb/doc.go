// Package metapb holds the Go messages generated from api/meta.proto, the
// definition of Canopy's metadata service. Do not edit meta.pb.go by hand:
// change the .proto and run `go generate ./api`.
package metapb
