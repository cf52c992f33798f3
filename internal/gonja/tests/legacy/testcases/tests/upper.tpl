{{ 'GONJA' is upper }}
{{ 'GÖNJA' is upper }}
{{ 'gonja' is upper }}
{{ 'Gonja' is upper }}
{{ 42 is upper }}
