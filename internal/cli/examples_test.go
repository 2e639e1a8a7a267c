package cli

import (
	"testing"

	"github.com/shoenig/test/must"
)

func TestExamples(t *testing.T) {
	usage := `Usage: tool sub [options]

  tool sub --a x/y.csv
  tool sub --philly [--nodes 128]  # a comment
  tool sub --generate 3 > w.csv   # redirected
  tool subother --no
  make sub
  tool sub
`
	got := Examples(usage, "tool sub")
	must.Eq(t, []Example{
		{Line: "tool sub --a x/y.csv", Args: []string{"--a", "x/y.csv"}},
		{Line: "tool sub --philly [--nodes 128]", Args: []string{"--philly", "--nodes", "128"}},
		{Line: "tool sub --generate 3 > w.csv", Args: []string{"--generate", "3"}, Stdout: "w.csv"},
		{Line: "tool sub"},
	}, got)
}
