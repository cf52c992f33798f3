-----
{{ lipsum(html=False) }}
-----
{{ lipsum(10, html=False) }}
-----
{{ lipsum(3) }}
-----
{{ lipsum(n=5, html=True, min=20, max=100) }}
-----
