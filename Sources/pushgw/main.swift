print("pushgw")
