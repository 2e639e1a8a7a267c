package httpapi

import (
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/caravan-nomad/caravan/planner/service/manager"
)

var snakeCase = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// TestJSONNamesAreSnakeCase walks every type the API encodes and requires
// each exported field to carry a snake_case JSON name (or be embedded, or
// be skipped with "-"), so no Go field name leaks into the API.
func TestJSONNamesAreSnakeCase(t *testing.T) {
	seen := map[reflect.Type]bool{}
	var walk func(reflect.Type, string)
	walk = func(typ reflect.Type, path string) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Array || typ.Kind() == reflect.Map {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || seen[typ] || typ == reflect.TypeOf(time.Time{}) {
			return
		}
		seen[typ] = true
		if _, ok := reflect.New(typ).Interface().(interface{ MarshalJSON() ([]byte, error) }); ok {
			return
		}
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			if !f.IsExported() {
				continue
			}
			tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			switch {
			case tag == "-":
				continue
			case f.Anonymous && tag == "":
				walk(f.Type, path)
				continue
			case !snakeCase.MatchString(tag):
				t.Errorf("%s.%s (%s): JSON name %q is not snake_case", path, f.Name, typ, tag)
			}
			walk(f.Type, path+"."+tag)
		}
	}
	walk(reflect.TypeOf(manager.Round{}), "plan")
	walk(reflect.TypeOf(Health{}), "health")
}
