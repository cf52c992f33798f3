{{ "Test"|first }}
{{ (complex.comments | first).Text  }}
{{ 5|first }}
{{ true|first }}
{{ nothing|first }}
{{ simple.chinese_hello_world|first }}
