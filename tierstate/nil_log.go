package tierstate

import "reflect"

// isNilLog reports whether a log argument is absent: a nil interface, or an
// interface holding a nil pointer (a caller passing a nil *log.UnifiedLog
// for "no future log" gets a non-nil interface whose methods would
// dereference nil). Reflection keeps tierstate free of a dependency on the
// concrete log type and covers any pointer implementation.
func isNilLog(x any) bool {
	if x == nil {
		return true
	}
	v := reflect.ValueOf(x)
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice, reflect.Func:
		return v.IsNil()
	}
	return false
}
