{{ persons|pprint }}
{{ simple.multiple_item_list|pprint }}
