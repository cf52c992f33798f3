{{ ""|capitalize }}
{{ 5|capitalize }}
{{ "h"|capitalize }}
{{ "hello there!"|capitalize }}
{{ "HELLO THERE!"|capitalize }}
{{ simple.chinese_hello_world|capitalize }}
