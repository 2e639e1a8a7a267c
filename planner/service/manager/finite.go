package manager

import (
	"fmt"
	"math"
	"reflect"
)

// nonFinite returns the path of the first NaN or ±Inf float in v (structs,
// pointers, slices, arrays and maps are walked), or "" if there is none.
// A fitted model or a view holding one cannot be rendered as JSON and must
// not steer decisions.
func nonFinite(v any) string {
	return walkFloats(reflect.ValueOf(v), "")
}

func walkFloats(v reflect.Value, path string) string {
	switch v.Kind() {
	case reflect.Float32, reflect.Float64:
		if f := v.Float(); math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Sprintf("%s=%v", path, f)
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			return walkFloats(v.Elem(), path)
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if !v.Type().Field(i).IsExported() {
				continue
			}
			if p := walkFloats(v.Field(i), path+"."+v.Type().Field(i).Name); p != "" {
				return p
			}
		}
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			if p := walkFloats(v.Index(i), fmt.Sprintf("%s[%d]", path, i)); p != "" {
				return p
			}
		}
	case reflect.Map:
		iter := v.MapRange()
		for iter.Next() {
			if p := walkFloats(iter.Value(), fmt.Sprintf("%s[%v]", path, iter.Key())); p != "" {
				return p
			}
		}
	}
	return ""
}
