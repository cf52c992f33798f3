package config

import (
	"errors"
	"strings"
)

// MonitorAuth is monitor.auth parsed: a bearer token, or a basic-auth user
// and password.
type MonitorAuth struct {
	Bearer   string
	User     string
	Password string
}

// ParseMonitorAuth reads monitor.auth: "bearer:TOKEN" or
// "basic:USER:PASSWORD"; empty is no authentication (the zero value).
func ParseMonitorAuth(s string) (MonitorAuth, error) {
	if s == "" {
		return MonitorAuth{}, nil
	}
	kind, rest, _ := strings.Cut(s, ":")
	switch strings.ToLower(kind) {
	case "bearer":
		if len(rest) < 16 {
			return MonitorAuth{}, errors.New(`the bearer token is shorter than 16 characters (use "bearer:" and a long random token, e.g. from openssl rand -hex 32)`)
		}
		return MonitorAuth{Bearer: rest}, nil
	case "basic":
		user, pass, ok := strings.Cut(rest, ":")
		if !ok || user == "" || pass == "" {
			return MonitorAuth{}, errors.New(`basic auth needs a user and a password: "basic:USER:PASSWORD"`)
		}
		return MonitorAuth{User: user, Password: pass}, nil
	}
	return MonitorAuth{}, errors.New(`must be "bearer:TOKEN" or "basic:USER:PASSWORD" (the value is not shown)`)
}

func checkMonitorAuth(s string) error {
	_, err := ParseMonitorAuth(s)
	return err
}
