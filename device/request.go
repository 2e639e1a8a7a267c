package device

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Request is a jobspec's `device` block as `caravan validate` checks it
// before submission (Nomad's servers do not know this plugin's names).
type Request struct {
	// Name is the block's label: "caravan/gpushare", "gpushare" or
	// "caravan/gpushare/<GPU UUID>".
	Name string
	// Count is the shares asked for (Nomad's default is 1).
	Count uint64
	// Constraints and Affinities are the block's terms.
	Constraints, Affinities []RequestTerm
}

// RequestTerm is one constraint or affinity of a device block.
type RequestTerm struct {
	Attribute, Operator, Value string
}

// deviceAttrs are the ${device.*} attributes Nomad itself sets on every
// device group (besides ${device.attr.<name>}).
var deviceAttrs = []string{"model", "vendor", "type", "ids"}

// groupAttrs are the attributes every share group carries.
var groupAttrs = []string{
	AttrModel, AttrUUID, AttrIndex, AttrMemory, AttrMemoryPerShare, AttrShares, AttrShareFraction, AttrBackend,
	AttrSimulated, AttrDriverVersion, AttrCUDADriverVersion, AttrComputeCapability, AttrPCIBusID, AttrMIG,
	AttrMIGProfile, AttrParentUUID, AttrMPS,
}

// ClaimsRequest reports whether a device block's name is meant for this
// plugin: it names the type "gpushare" or the vendor "caravan" (also
// misspelt ones such as "caravan-gpu", the plugin's file name, which never
// match a device).
func ClaimsRequest(name string) bool {
	parts := strings.Split(name, "/")
	return parts[0] == DeviceType || strings.HasPrefix(parts[0], Vendor) ||
		(len(parts) > 1 && parts[1] == DeviceType)
}

// CheckRequest returns every reason the plugin's groups can never satisfy r,
// each naming its field (name, count, constraint[i], affinity[i]), or nil.
// It checks what is known before placement: the name, the share count
// against the plugin's limits, and the attributes the terms refer to.
func CheckRequest(r Request) []error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if err := checkRequestName(r.Name); err != "" {
		bad("name", "%s", err)
	}
	switch {
	case r.Count == 0:
		bad("count", "must be at least 1 share")
	case r.Count > maxSharesLimit:
		bad("count", "%d shares, more than any GPU can be split into (%d): the shares of a request come from one GPU", r.Count, maxSharesLimit)
	}
	for i, c := range r.Constraints {
		field := fmt.Sprintf("constraint[%d]", i)
		if err := checkTermAttribute(c.Attribute); err != "" {
			bad(field+".attribute", "%s", err)
		}
		if n, ok := sharesPerGPU(c); ok && r.Count > n {
			bad("count", "%d shares, but %s asks for GPUs split into %d: the shares of a request come from one GPU, so it is never placed",
				r.Count, field, n)
		}
	}
	for i, a := range r.Affinities {
		if err := checkTermAttribute(a.Attribute); err != "" {
			bad(fmt.Sprintf("affinity[%d].attribute", i), "%s", err)
		}
	}
	return errs
}

// RequestWarnings are the reasons r may never be placed that depend on
// the plugin's config, which a jobspec does not know: a count above the
// plugin's default share count per GPU when no constraint names
// ${device.attr.shares} (CheckRequest checks the count against one that
// does). Each names its field.
func RequestWarnings(r Request) []string {
	for _, c := range r.Constraints {
		if _, ok := sharesPerGPU(c); ok {
			return nil
		}
	}
	if r.Count <= defaultShares {
		return nil
	}
	return []string{fmt.Sprintf("count: %d shares, but the plugin splits each GPU into %d by default: the request is placed only "+
		"on clients whose plugin config sets shares (or a share_override) of at least %d; "+
		"a constraint on ${device.attr.%s} says which split it needs", r.Count, defaultShares, r.Count, AttrShares)}
}

func checkRequestName(name string) string {
	want := fmt.Sprintf("want %q, %q or %q", Vendor+"/"+DeviceType, DeviceType, Vendor+"/"+DeviceType+"/<GPU UUID>")
	parts := strings.Split(name, "/")
	switch {
	case len(parts) == 1 && parts[0] == DeviceType:
	case len(parts) == 2 && parts[0] == Vendor && parts[1] == DeviceType:
	case len(parts) == 3 && parts[0] == Vendor && parts[1] == DeviceType && parts[2] != "":
	default:
		return fmt.Sprintf("%q matches no caravan GPU share device (%s)", name, want)
	}
	return ""
}

// checkTermAttribute refuses ${device.attr.<name>} with a name the share
// groups do not carry, and ${device.<x>} Nomad does not set.
func checkTermAttribute(attr string) string {
	inner, ok := strings.CutPrefix(strings.TrimSpace(attr), "${device.")
	if !ok {
		return ""
	}
	inner, ok = strings.CutSuffix(inner, "}")
	if !ok {
		return fmt.Sprintf("%q is not closed by }", attr)
	}
	if name, ok := strings.CutPrefix(inner, "attr."); ok {
		if !slices.Contains(groupAttrs, name) {
			return fmt.Sprintf("%q: the caravan GPU share groups have no attribute %q (they have %s)",
				attr, name, strings.Join(groupAttrs, ", "))
		}
		return ""
	}
	if !slices.Contains(deviceAttrs, inner) {
		return fmt.Sprintf("%q: Nomad sets no device attribute %q (use ${device.attr.<name>})", attr, inner)
	}
	return ""
}

// sharesPerGPU is the share count a constraint pins (${device.attr.shares}
// equal to a number).
func sharesPerGPU(c RequestTerm) (uint64, bool) {
	if strings.TrimSpace(c.Attribute) != "${device.attr."+AttrShares+"}" {
		return 0, false
	}
	switch c.Operator {
	case "", "=", "==", "is":
	default:
		return 0, false
	}
	n, err := strconv.ParseUint(strings.TrimSpace(c.Value), 10, 64)
	return n, err == nil
}
