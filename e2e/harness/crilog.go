package harness

import (
	"regexp"
	"strings"
)

// criLine is one line of the CRI ("k8s-file") log format: a timestamp, the
// stream, a tag (F: the line is complete; P: a partial line, continued on
// the next line of the same stream) and the text.
var criLine = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d) (stdout|stderr) ([FP])(?::\S*)? ?(.*)$`)

// isCRILog says whether every line of a task log is in the CRI format:
// what Nomad's podman driver (nomad-driver-podman v0.6.5, its default
// logging driver "nomad") writes to the task's stdout log, stderr lines
// included, since podman's k8s-file log driver writes into Nomad's fifo.
func isCRILog(log string) bool {
	if log == "" {
		return false
	}
	for _, l := range strings.Split(strings.TrimSuffix(log, "\n"), "\n") {
		if !criLine.MatchString(l) {
			return false
		}
	}
	return true
}

// criStream decodes a CRI-format log into the plain text of one stream
// ("stdout" or "stderr"), joining partial lines, as the task printed it.
func criStream(log, stream string) string {
	var out, partial strings.Builder
	for _, l := range strings.Split(strings.TrimSuffix(log, "\n"), "\n") {
		m := criLine.FindStringSubmatch(l)
		if m == nil || m[1] != stream {
			continue
		}
		partial.WriteString(m[3])
		if m[2] == "F" {
			out.WriteString(partial.String())
			out.WriteByte('\n')
			partial.Reset()
		}
	}
	out.WriteString(partial.String())
	return out.String()
}

// PlainLog returns a task log as the task printed the stream: a CRI-format
// log (Nomad's podman driver) decoded, any other returned as it is.
func PlainLog(log, stream string) string {
	if isCRILog(log) {
		return criStream(log, stream)
	}
	return log
}
