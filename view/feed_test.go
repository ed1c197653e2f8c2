package view

import (
	"reflect"
	"testing"
	"time"

	"github.com/berth-dev/berth/schema"
)

// TestSameWorkspaceCoversEveryField: a field added to WorkspaceStatus
// must be compared by sameWorkspace, or deltas would miss its changes.
func TestSameWorkspaceCoversEveryField(t *testing.T) {
	a := WorkspaceStatus{}
	v := reflect.ValueOf(&a).Elem()
	for i := range v.NumField() {
		b := a
		f := reflect.ValueOf(&b).Elem().Field(i)
		switch f.Interface().(type) {
		case string, State:
			f.SetString("x")
		case time.Duration, Seconds:
			f.SetInt(1)
		case time.Time:
			f.Set(reflect.ValueOf(time.Unix(1, 0)))
		case []string:
			f.Set(reflect.ValueOf([]string{"x"}))
		case *schema.Ref:
			f.Set(reflect.ValueOf(&schema.Ref{Project: "p", Name: "n"}))
		case []Endpoint:
			f.Set(reflect.ValueOf([]Endpoint{{Label: "http", Address: "h:1"}}))
		case *RunTimeStatus:
			f.Set(reflect.ValueOf(&RunTimeStatus{Median: 1}))
		case *LikelyStart:
			f.Set(reflect.ValueOf(&LikelyStart{Known: true}))
		case *EndStatus:
			f.Set(reflect.ValueOf(&EndStatus{Class: "node-fault"}))
		case *GPUUseStatus:
			f.Set(reflect.ValueOf(&GPUUseStatus{MaxPercent: 85, MeanPercent: 85, GPUs: 1}))
		default:
			t.Fatalf("WorkspaceStatus.%s: a type this test does not know; teach it and sameWorkspace", v.Type().Field(i).Name)
		}
		if sameWorkspace(&a, &b) {
			t.Errorf("sameWorkspace misses a change of WorkspaceStatus.%s", v.Type().Field(i).Name)
		}
	}
}
