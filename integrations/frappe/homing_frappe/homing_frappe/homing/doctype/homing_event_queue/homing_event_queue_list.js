frappe.listview_settings["Homing Event Queue"] = {
	add_fields: ["status", "last_status_code"],
	get_indicator(doc) {
		return doc.status === "Failed"
			? [__("Failed"), "red", "status,=,Failed"]
			: [__("Queued"), "orange", "status,=,Queued"];
	},
	onload(listview) {
		listview.page.add_action_item(__("Queue again"), () => {
			const names = listview.get_checked_items(true);
			frappe
				.call("homing_frappe.frappe_glue.requeue", { names })
				.then((r) => {
					frappe.show_alert(__("{0} queued again", [r.message || 0]));
					listview.refresh();
				});
		});
	},
};
