// Package api holds the .proto definitions of Canopy's services; the
// generated Go lives in api/metapb. Regenerate with `go generate ./api`
// (needs protoc and protoc-gen-go on PATH).
package api

//go:generate protoc --proto_path=. --go_out=. --go_opt=module=github.com/canopyfs/canopy/api meta.proto
