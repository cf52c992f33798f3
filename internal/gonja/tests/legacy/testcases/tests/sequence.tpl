{{ 'gonja' is sequence }}
{{ [1, 2, 3] is sequence }}
{{ 42 is sequence }}
{{ {"key": "value"} is sequence }}
{{ true is sequence }}