frappe.ui.form.on("Homing Settings", {
	refresh(frm) {
		frm.add_custom_button(__("Push now"), () =>
			frappe.call("homing_frappe.frappe_glue.push_now").then((r) => {
				const s = r.message || {};
				frappe.msgprint(
					__("Sent {0}, retried {1}, failed {2}.", [s.sent, s.retried, s.failed]) +
						(s.halted ? "<br>" + frappe.utils.escape_html(s.halted) : "") +
						(s.skipped ? "<br>" + frappe.utils.escape_html(s.skipped) : "")
				);
			})
		);
		frm.add_custom_button(__("Queue"), () => frappe.set_route("List", "Homing Event Queue"));
	},
});
