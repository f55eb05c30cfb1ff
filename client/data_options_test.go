package client

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/canopyfs/canopy/internal/data"
)

// DataOptions carries every tuning field of data.Config (all but the
// layout, which is the server's) under the same name, and config hands
// each one over.
func TestDataOptionsMapToConfig(t *testing.T) {
	var o DataOptions
	ov := reflect.ValueOf(&o).Elem()
	for i := range ov.NumField() {
		switch ov.Field(i).Kind() {
		case reflect.String:
			ov.Field(i).SetString(fmt.Sprint(100 + i))
		case reflect.Bool:
			ov.Field(i).SetBool(true)
		default:
			ov.Field(i).SetInt(int64(100 + i))
		}
	}
	cv := reflect.ValueOf(o.config())
	ct := cv.Type()
	for i := range ov.NumField() {
		name := ov.Type().Field(i).Name
		f := cv.FieldByName(name)
		if !f.IsValid() {
			t.Errorf("DataOptions.%s has no data.Config field", name)
			continue
		}
		if f.Kind() == reflect.Bool {
			if !f.Bool() {
				t.Errorf("config: %s not handed over", name)
			}
			continue
		}
		if f.Kind() == reflect.String {
			if f.String() != fmt.Sprint(100+i) {
				t.Errorf("config: %s = %q, want %q", name, f.String(), fmt.Sprint(100+i))
			}
			continue
		}
		if f.Int() != int64(100+i) {
			t.Errorf("config: %s = %d, want %d", name, f.Int(), 100+i)
		}
	}
	for i := range ct.NumField() {
		name := ct.Field(i).Name
		if _, ok := ov.Type().FieldByName(name); !ok && name != "ChunkSize" && name != "BlockSize" {
			t.Errorf("data.Config.%s has no DataOptions field", name)
		}
	}
	if c := (DataOptions{}).config(); c != (data.Config{}) {
		t.Errorf("zero DataOptions give %+v, want the zero data.Config (the defaults)", c)
	}
}
