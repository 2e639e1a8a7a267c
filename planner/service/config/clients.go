package config

import (
	consulapi "github.com/hashicorp/consul/api"
	nomadapi "github.com/hashicorp/nomad/api"
)

// NomadConfig returns a nomad/api config: the NOMAD_* environment (read by
// nomadapi.DefaultConfig) overlaid with whatever this config sets.
func (c *Config) NomadConfig() *nomadapi.Config {
	nc := nomadapi.DefaultConfig()
	n := c.Nomad
	over(&nc.Address, n.Address)
	over(&nc.Region, n.Region)
	over(&nc.SecretID, n.Token)
	if n.Namespace != "" && n.Namespace != "*" {
		nc.Namespace = n.Namespace
	}
	over(&nc.TLSConfig.CACert, n.CACert)
	over(&nc.TLSConfig.ClientCert, n.ClientCert)
	over(&nc.TLSConfig.ClientKey, n.ClientKey)
	over(&nc.TLSConfig.TLSServerName, n.TLSServerName)
	if n.TLSSkipVerify {
		nc.TLSConfig.Insecure = true
	}
	return nc
}

// ConsulConfig returns a consul/api config: the CONSUL_* environment overlaid
// with whatever this config sets.
func (c *Config) ConsulConfig() *consulapi.Config {
	cc := consulapi.DefaultConfig()
	k := c.Consul
	over(&cc.Address, k.Address)
	over(&cc.Token, k.Token)
	over(&cc.Datacenter, k.Datacenter)
	over(&cc.TLSConfig.CAFile, k.CACert)
	over(&cc.TLSConfig.CertFile, k.ClientCert)
	over(&cc.TLSConfig.KeyFile, k.ClientKey)
	if k.TLSSkipVerify {
		cc.TLSConfig.InsecureSkipVerify = true
	}
	return cc
}

func over(dst *string, v string) {
	if v != "" {
		*dst = v
	}
}
