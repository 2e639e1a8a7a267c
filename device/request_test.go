package device

import (
	"errors"
	"testing"

	"github.com/shoenig/test/must"
)

// TestCheckRequest: a device block the share groups can never satisfy is
// refused before submission with every reason, each naming its field.
func TestCheckRequest(t *testing.T) {
	shares4 := RequestTerm{Attribute: "${device.attr.shares}", Value: "4"}
	cases := []struct {
		name string
		req  Request
		want []string
	}{
		{"fraction", Request{Name: "caravan/gpushare", Count: 2, Constraints: []RequestTerm{shares4},
			Affinities: []RequestTerm{{Attribute: "${device.attr.index}", Operator: "<=", Value: "0"}}}, nil},
		{"bare type", Request{Name: "gpushare", Count: 1}, nil},
		{"one GPU", Request{Name: "caravan/gpushare/GPU-8f3c", Count: 4, Constraints: []RequestTerm{shares4}}, nil},
		{"model", Request{Name: "caravan/gpushare", Count: 1, Constraints: []RequestTerm{
			{Attribute: "${device.attr.model}", Value: "NVIDIA A100-SXM4-40GB"},
			{Attribute: "${device.attr.memory_per_share}", Operator: ">=", Value: "8192 MiB"},
			{Attribute: "${device.model}", Value: "GPU-1"}}}, nil},
		{"plugin name", Request{Name: "caravan-gpu", Count: 1}, []string{`name: "caravan-gpu" matches no caravan GPU share device`}},
		{"wrong type", Request{Name: "caravan/gpu", Count: 1}, []string{`name: "caravan/gpu"`}},
		{"empty GPU", Request{Name: "caravan/gpushare/", Count: 1}, []string{"name: "}},
		{"zero count", Request{Name: "caravan/gpushare"}, []string{"count: must be at least 1"}},
		{"huge count", Request{Name: "caravan/gpushare", Count: 5000}, []string{"count: 5000 shares, more than"}},
		{"more shares than the GPU has", Request{Name: "caravan/gpushare", Count: 8, Constraints: []RequestTerm{shares4}},
			[]string{"count: 8 shares, but constraint[0] asks for GPUs split into 4"}},
		{"every error at once", Request{Name: "caravan/gpus", Count: 0,
			Constraints: []RequestTerm{{Attribute: "${device.attr.memory_share}", Value: "1"}},
			Affinities:  []RequestTerm{{Attribute: "${device.name}", Value: "x"}, {Attribute: "${device.attr.index", Value: "0"}}},
			[]string{"name: ", "count: ", `constraint[0].attribute: "${device.attr.memory_share}": the caravan GPU share groups have no attribute "memory_share"`,
				`affinity[0].attribute: "${device.name}": Nomad sets no device attribute "name"`, "affinity[1].attribute: "}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			errs := CheckRequest(tc.req)
			must.Len(t, len(tc.want), errs, must.Sprint(errors.Join(errs...)))
			for i, w := range tc.want {
				must.StrContains(t, errs[i].Error(), w)
			}
		})
	}
}

func TestClaimsRequest(t *testing.T) {
	for name, want := range map[string]bool{
		"caravan/gpushare": true, "gpushare": true, "caravan/gpushare/GPU-1": true, "caravan-gpu": true, "caravan/gpu": true,
		"acme/gpushare": true, "nvidia/gpu": false, "gpu": false, "nvidia/gpu/Tesla T4": false,
	} {
		must.Eq(t, want, ClaimsRequest(name), must.Sprint(name))
	}
}

// TestRequestWarnings: a count above the plugin's default share count is a
// warning (a client's plugin config may split GPUs finer) unless a
// constraint names the split, which CheckRequest checks instead.
func TestRequestWarnings(t *testing.T) {
	shares8 := RequestTerm{Attribute: "${device.attr.shares}", Value: "8"}
	cases := []struct {
		name string
		req  Request
		want string
	}{
		{"within the default", Request{Name: "caravan/gpushare", Count: defaultShares}, ""},
		{"above the default", Request{Name: "caravan/gpushare", Count: 6}, "count: 6 shares, but the plugin splits each GPU into 4 by default"},
		{"the split named", Request{Name: "caravan/gpushare", Count: 6, Constraints: []RequestTerm{shares8}}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := RequestWarnings(tc.req)
			if tc.want == "" {
				must.SliceEmpty(t, got)
				return
			}
			must.SliceLen(t, 1, got)
			must.StrHasPrefix(t, tc.want, got[0])
		})
	}
}
