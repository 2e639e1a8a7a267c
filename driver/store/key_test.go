package store

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/shoenig/test/must"
)

func TestEscapePart(t *testing.T) {
	cases := []struct{ in, want string }{
		{"plain-job_1", "plain-job_1"},
		{"v1.2", "v1.2"},
		{".", "%2E"},
		{"..", "%2E."},
		{".hidden", "%2Ehidden"},
		{"a/b", "a%2Fb"},
		{`a\b`, "a%5Cb"},
		{"100%", "100%25"},
		{"a%2Fb", "a%252Fb"},
		{"nul\x00", "nul%00"},
		{"space here", "space%20here"},
		{"é", "%C3%A9"},
		{"parent/periodic-1700000000", "parent%2Fperiodic-1700000000"},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			must.Eq(t, tc.want, escapePart(tc.in))
		})
	}
}

func TestEscapePartIsInjective(t *testing.T) {
	// Pairs that a naive escaping would collide.
	pairs := [][2]string{{"a/b", "a%2Fb"}, {"..", "%2E."}, {".a", "%2Ea"}, {"a b", "a_b"}, {"A", "a"}}
	for _, p := range pairs {
		must.NotEq(t, escapePart(p[0]), escapePart(p[1]))
	}
}

func TestKeyValidate(t *testing.T) {
	ok := Key{Namespace: "default", Job: "j", Group: "g", Task: "t", Index: 0}
	cases := []struct {
		name    string
		mutate  func(*Key)
		wantErr string
	}{
		{"valid", func(*Key) {}, ""},
		{"empty namespace", func(k *Key) { k.Namespace = "" }, "namespace"},
		{"empty job", func(k *Key) { k.Job = "" }, "job"},
		{"empty group", func(k *Key) { k.Group = "" }, "group"},
		{"empty task", func(k *Key) { k.Task = "" }, "task"},
		{"negative index", func(k *Key) { k.Index = -1 }, "index"},
		{"too long", func(k *Key) { k.Job = strings.Repeat("/", 100) }, "too long"},
		{"bad incarnation", func(k *Key) { k.Incarnation = "../x" }, "incarnation"},
		{"dispatch job id with slash", func(k *Key) { k.Job = "batch/dispatch-1-abc" }, ""},
		{"dot-dot everywhere", func(k *Key) { *k = Key{Namespace: "..", Job: "..", Group: "..", Task: ".."} }, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k := ok
			tc.mutate(&k)
			err := k.Validate()
			if tc.wantErr == "" {
				must.NoError(t, err)
				return
			}
			must.ErrorIs(t, err, ErrInvalid)
			must.StrContains(t, err.Error(), tc.wantErr)
		})
	}
}

// TestKeyTraversal checks that hostile key parts always map to a directory
// exactly five levels below the root.
func TestKeyTraversal(t *testing.T) {
	root := "/store"
	hostile := []string{"..", "../..", "../../etc", "/", "/etc/passwd", ".", "a/../../b", `..\..`, ".chunks", ".tmp", "\x00"}
	for _, h := range hostile {
		for field := 0; field < 4; field++ {
			k := Key{Namespace: "ns", Job: "job", Group: "g", Task: "t", Index: 3}
			switch field {
			case 0:
				k.Namespace = h
			case 1:
				k.Job = h
			case 2:
				k.Group = h
			case 3:
				k.Task = h
			}
			dir, err := k.dir(root)
			must.NoError(t, err)
			rel, err := filepath.Rel(root, dir)
			must.NoError(t, err)
			parts := strings.Split(rel, string(filepath.Separator))
			must.Len(t, 5, parts, must.Sprintf("key %+v -> %s", k, dir))
			for _, p := range parts {
				must.False(t, strings.HasPrefix(p, "."), must.Sprintf("part %q of %s", p, dir))
			}
			must.Eq(t, dir, filepath.Clean(dir))
		}
	}
}

func TestKeyShapes(t *testing.T) {
	cases := []struct {
		name string
		key  Key
		want string
	}{
		{"alloc", Key{Namespace: "default", Job: "train", Group: "g", Task: "t", Index: 2}, "default/train/g/t/2"},
		{"group", Key{Namespace: "default", Job: "train", Group: "g", Task: "t", Index: 7, Shared: true}, "default/train/g/t/group"},
		{"incarnation", Key{Namespace: "default", Job: "train", Group: "g", Task: "t", Incarnation: "1042"}, "default/train@1042/g/t/0"},
		{"job with @", Key{Namespace: "default", Job: "a@1", Group: "g", Task: "t"}, "default/a%401/g/t/0"},
		{"allocation-bound", Key{Namespace: "default", Job: "train", Group: "g", Task: "t", Index: 1, Incarnation: "alloc-5c6328f7-48c5"}, "default/train@alloc-5c6328f7-48c5/g/t/1"},
		{"group named group", Key{Namespace: "n", Job: "j", Group: "group", Task: "group", Shared: true, Incarnation: "9"}, "n/j@9/group/group/group"},
		{"escaped", Key{Namespace: "n", Job: "batch/dispatch-1", Group: ".g", Task: "t t", Index: 0}, "n/batch%2Fdispatch-1/%2Eg/t%20t/0"},
	}
	seen := map[string]bool{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			must.Eq(t, tc.want, tc.key.String())
			must.False(t, seen[tc.want])
			seen[tc.want] = true
			back, err := ParseKey(tc.want)
			must.NoError(t, err)
			if tc.key.Shared {
				tc.key.Index = 0 // not part of a shared key
			}
			must.Eq(t, tc.key, back)
		})
	}
}

func TestParseKeyRefusesBadInput(t *testing.T) {
	cases := []struct{ in, want string }{
		{"", "5 parts"},
		{"a/b/c/d", "5 parts"},
		{"a/b/c/d/e/f", "5 parts"},
		{"a/b/c/d/x", "slot"},
		{"a/b/c/d/-1", "slot"},
		{"a/b/c/d/01", "canonical"},
		{"a/b@/c/d/0", "incarnation"},
		{"a/b@x.y/c/d/0", "incarnation"},
		{"a/b@x%2F/c/d/0", "incarnation"},
		{"a/b@1@2/c/d/0", "job"},
		{"a/%2/c/d/0", "job"},
		{"a/%zz/c/d/0", "job"},
		{"a/%41/c/d/0", "job"}, // %41 is "A", which escapes to itself
		{"a//c/d/0", "job"},
		{"../b/c/d/0", "namespace"},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			_, err := ParseKey(tc.in)
			must.ErrorIs(t, err, ErrInvalid)
			must.StrContains(t, err.Error(), tc.want)
		})
	}
}
