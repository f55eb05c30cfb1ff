package engine

import (
	"reflect"
	"testing"
	"unsafe"
)

// A node is a 56-byte record without pointers: the slab's chunks are then
// allocated as memory the garbage collector never scans, and a file costs
// one record.
func TestNodeLayout(t *testing.T) {
	if size := unsafe.Sizeof(node{}); size != 56 {
		t.Fatalf("node is %d bytes, want 56", size)
	}
	typ := reflect.TypeOf(node{})
	for i := range typ.NumField() {
		switch typ.Field(i).Type.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Map, reflect.String, reflect.Interface, reflect.Chan, reflect.Func:
			t.Fatalf("node field %s holds a pointer", typ.Field(i).Name)
		}
	}
}
