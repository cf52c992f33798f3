{{ 2 is even }}
{{ 1 is even }}
{{ 0 is even }}
{{ 2.1 is even }}
{{ 'test' is even }}
