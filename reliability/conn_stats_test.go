package reliability

import (
	"reflect"
	"testing"
)

// Add covers every counter: a field added to Stats and forgotten in Add
// would make a VI's totals lie.
func TestStatsAddCoversEveryField(t *testing.T) {
	var one Stats
	v := reflect.ValueOf(&one).Elem()
	for i := range v.NumField() {
		v.Field(i).SetUint(uint64(i + 1))
	}
	sum := one.Add(one)
	w := reflect.ValueOf(sum)
	for i := range w.NumField() {
		if got, want := w.Field(i).Uint(), 2*uint64(i+1); got != want {
			t.Errorf("Add: field %s is %d, want %d", w.Type().Field(i).Name, got, want)
		}
	}
}
