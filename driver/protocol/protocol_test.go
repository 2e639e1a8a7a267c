package protocol

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/shoenig/test/must"
)

func TestMarker_RoundTripAndErrors(t *testing.T) {
	dir := t.TempDir()
	_, err := ReadMarker(dir)
	must.ErrorIs(t, err, ErrNoMarker)

	step := uint64(12)
	must.NoError(t, WriteMarker(dir, &Marker{Sequence: 3, Step: &step, Meta: map[string]string{"k": "v"}}))
	m, err := ReadMarker(dir)
	must.NoError(t, err)
	must.Eq(t, uint64(3), m.Sequence)
	must.Eq(t, step, *m.Step)
	must.Eq(t, "v", m.Meta["k"])
	ents, err := os.ReadDir(dir)
	must.NoError(t, err)
	must.SliceLen(t, 1, ents) // no temporary file left behind

	must.Error(t, WriteMarker(dir, &Marker{Sequence: 0}))

	cases := []struct{ name, content string }{
		{"not json", "{"},
		{"sequence zero", `{"sequence": 0}`},
		{"negative sequence", `{"sequence": -1}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := t.TempDir()
			must.NoError(t, os.WriteFile(filepath.Join(d, MarkerName), []byte(tc.content), 0o644))
			_, err := ReadMarker(d)
			must.Error(t, err)
		})
	}
}

func TestFromEnv(t *testing.T) {
	env := map[string]string{
		EnvDir: "/ck", EnvSignal: "SIGUSR1", EnvGeneration: "4", EnvSequence: "9", EnvStep: "1200", EnvRestoredFrom: "client1",
	}
	r, err := FromEnv(func(k string) string { return env[k] })
	must.NoError(t, err)
	must.Eq(t, "/ck", r.Dir)
	must.Eq(t, uint64(4), r.Generation)
	must.Eq(t, uint64(9), r.Sequence)
	must.Eq(t, uint64(1200), *r.Step)
	must.Eq(t, "client1", r.FromNode)

	r, err = FromEnv(func(string) string { return "" })
	must.NoError(t, err)
	must.Eq(t, "", r.Dir)
	must.Nil(t, r.Step)

	for _, k := range []string{EnvGeneration, EnvSequence, EnvStep} {
		_, err := FromEnv(func(name string) string {
			if name == k {
				return "x"
			}
			return ""
		})
		must.ErrorContains(t, err, k)
	}
}

func TestMarker_Skip(t *testing.T) {
	dir := t.TempDir()
	must.NoError(t, WriteMarker(dir, &Marker{Sequence: 4, Skip: true}))
	b, err := os.ReadFile(filepath.Join(dir, MarkerName))
	must.NoError(t, err)
	must.Eq(t, `{"sequence":4,"skip":true}`, string(b))
	m, err := ReadMarker(dir)
	must.NoError(t, err)
	must.True(t, m.Skip)
	must.Nil(t, m.Step)

	must.NoError(t, WriteMarker(dir, &Marker{Sequence: 5}))
	b, err = os.ReadFile(filepath.Join(dir, MarkerName))
	must.NoError(t, err)
	must.Eq(t, `{"sequence":5}`, string(b), must.Sprint("skip is omitted when false"))
	must.Error(t, WriteMarker(dir, &Marker{Sequence: 0, Skip: true}))
}
